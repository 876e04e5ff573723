"""ST-2..ST-12: random initialize/write/failover/read under every profile; replaying the log gives the in-memory
state after any sequence and at any failover point, and both equal a shadow kept offset by offset from the
accepted requests (kip: a later write wins, ST-7; Kafka 4.2: the higher delivery count, then state, ST-8;
Kafka 4.4: negative epochs refused, ST-40, and a start offset that never goes back, ST-41)."""

from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kipcheck.model import share_state as sst
from kipcheck.model.errors import Error

PERSISTED = ("available", "acknowledged", "archived")
STATE_IDS = {"available": 0, "acquired": 1, "acknowledged": 2, "archiving": 3, "archived": 4}  # DeliveryState ids


def batches(states):
    fields = st.tuples(st.integers(0, 30), st.integers(0, 4), st.sampled_from(states), st.integers(0, 5))
    return st.lists(fields.map(lambda f: sst.Batch(f[0], f[0] + f[1], f[2], f[3])), max_size=3)


def expanded(state):
    """offset -> (state, delivery count) of a persisted state's batches."""
    return {offset: (batch.state, batch.delivery_count) for batch in state.batches
            for offset in range(batch.first, batch.last + 1)}


class ShareStateMachine(RuleBasedStateMachine):
    PROFILE = "kip"
    STATES = PERSISTED  # ST-15: kip never persists Acquired

    def __init__(self):
        super().__init__()
        self.coordinator = sst.ShareCoordinator(profile=self.PROFILE, deltas_per_checkpoint=3)
        self.shadow = None  # (state_epoch, start_offset, {offset: (state, count)}) from accepted requests

    @rule(state_epoch=st.integers(-1, 3), start_offset=st.integers(0, 10))
    def initialize(self, state_epoch, start_offset):
        if self.coordinator.initialize(state_epoch, start_offset).error == Error.NONE:  # ST-2
            self.shadow = (state_epoch, start_offset, {})  # ST-2: a new state replaces the old

    def wins(self, new, old):
        return True  # ST-7: a later write wins, offset by offset

    def new_start(self, start, start_offset):
        return start if start_offset == sst.UNCHANGED else start_offset  # ST-6

    @rule(data=st.data())
    def write(self, data):
        written = data.draw(batches(self.STATES))
        epoch = self.shadow[0] if self.shadow and data.draw(st.booleans()) else data.draw(st.integers(-1, 3))
        start_offset = data.draw(st.sampled_from([sst.UNCHANGED, 0, 5, 12]))
        if self.coordinator.write(epoch, start_offset, written).error != Error.NONE:
            return
        state_epoch, start, offsets = self.shadow
        for batch in written:
            for offset in range(batch.first, batch.last + 1):
                if offset not in offsets or self.wins((batch.state, batch.delivery_count), offsets[offset]):
                    offsets[offset] = (batch.state, batch.delivery_count)
        start = self.new_start(start, start_offset)
        self.shadow = (state_epoch, start, {offset: value for offset, value in offsets.items() if offset >= start})

    @rule()
    def failover(self):
        self.coordinator.failover()

    @rule()
    def read(self):
        answer = self.coordinator.read()
        assert (answer.error == Error.NONE) == (self.shadow is not None), f"{answer.clause}: read before/after initialize"

    @invariant()
    def replay_equals_memory_equals_shadow(self):
        replayed = sst.replay(self.coordinator.log(), self.PROFILE, 3)
        state = self.coordinator.state
        assert replayed == state, f"ST-11: replay {replayed} != in-memory {state}"
        if self.shadow is None:
            assert state is None
            return
        assert (state.state_epoch, state.start_offset, expanded(state)) == self.shadow, "ST-6/ST-7: state != accepted writes"


TestShareStateMachine = ShareStateMachine.TestCase
TestShareStateMachine.settings = settings.get_profile("kipcheck-machines")


class KafkaShareStateMachine(ShareStateMachine):
    PROFILE = "kafka-4.2"
    STATES = PERSISTED + ("acquired",)  # ST-16: Kafka stores any state

    def wins(self, new, old):
        # ST-8: the higher delivery count wins, then the higher state id.
        return (new[1], STATE_IDS[new[0]]) >= (old[1], STATE_IDS[old[0]])


TestKafkaShareStateMachine = KafkaShareStateMachine.TestCase
TestKafkaShareStateMachine.settings = settings.get_profile("kipcheck-machines")


class Kafka44ShareStateMachine(KafkaShareStateMachine):
    PROFILE = "kafka-4.4"
    STATES = KafkaShareStateMachine.STATES + ("archiving",)  # ST-8, ST-16: a dead-letter queue's DeliveryState 3

    def new_start(self, start, start_offset):
        return max(start, start_offset)  # ST-41: never back (-1, unchanged, is never higher)

    @invariant()
    def no_negative_state_epoch_is_stored(self):
        state = self.coordinator.state
        assert state is None or state.state_epoch >= 0, f"ST-40: state epoch {state.state_epoch} stored"


TestKafka44ShareStateMachine = Kafka44ShareStateMachine.TestCase
TestKafka44ShareStateMachine.settings = settings.get_profile("kipcheck-machines")

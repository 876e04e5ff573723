package dev.kipcheck.kafka;

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Kafka's command-line tools, many runs in one JVM: each line names a tool's main class and its arguments, and is
 * answered with what the tool printed and the status it exited with, as if it had run alone.
 *
 * <pre>java -cp KIPCHECK_JAR:KAFKA_CLASSPATH dev.kipcheck.kafka.ToolRunner</pre>
 *
 * Standard input: one run a line, the main class and its arguments separated by tabs. Standard output: one JSON
 * object a line for each, {"exit": STATUS, "out": TEXT, "err": TEXT}. Kafka's tools end through Exit.exit (in
 * org.apache.kafka.common.utils up to 4.2, in its internals package from 4.4; whichever the jars hold), which
 * is caught here: the first call's status is the run's, and what the tool printed after it is dropped, as a JVM
 * that ended there would never have printed it (a tool may catch the exception that stands in for the exit, and
 * go on). A main that returns exits 0, one that throws exits 1 with its exception on "err". Log4j must write to
 * the current System.err (its console appender's `follow`), so that a tool's logged errors land in its own "err".
 */
public final class ToolRunner {
    private ToolRunner() {
    }

    /** Thrown instead of ending the JVM when a tool calls Exit.exit. */
    static final class ExitCalled extends RuntimeException {
        ExitCalled() {
            super(null, null, false, false);
        }
    }

    /** One tool's run: where it prints, and its first exit (its status, and how much it had printed then). */
    static final class Run {
        final ByteArrayOutputStream out = new ByteArrayOutputStream();
        final ByteArrayOutputStream err = new ByteArrayOutputStream();
        Integer status;
        int outEnd;
        int errEnd;

        synchronized void exited(int exitStatus) {
            if (status == null) {
                System.out.flush();
                System.err.flush();
                status = exitStatus;
                outEnd = out.size();
                errEnd = err.size();
            }
            throw new ExitCalled();
        }

        synchronized Map<String, Object> answer(int statusIfNoExit) {
            Map<String, Object> answer = new LinkedHashMap<>();
            answer.put("exit", status == null ? statusIfNoExit : status);
            answer.put("out", text(out, status == null ? out.size() : outEnd));
            answer.put("err", text(err, status == null ? err.size() : errEnd));
            return answer;
        }

        static String text(ByteArrayOutputStream bytes, int length) {
            return new String(bytes.toByteArray(), 0, length, StandardCharsets.UTF_8);
        }
    }

    private static volatile Run current;

    /** Kafka's Exit classes, the one of each release line: the package moved in Kafka 4.4. */
    private static final String[] EXIT_CLASSES = {
        "org.apache.kafka.common.utils.Exit", "org.apache.kafka.common.utils.internals.Exit"};

    public static void main(String[] args) throws IOException, ReflectiveOperationException {
        PrintStream answers = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        catchExits();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.split("\t", -1);
            answers.println(Json.write(run(words[0], Arrays.copyOfRange(words, 1, words.length))));
            answers.flush();
        }
    }

    /** Every Exit class on the classpath calls Run.exited instead of ending the JVM. */
    static void catchExits() throws ReflectiveOperationException {
        int found = 0;
        for (String name : EXIT_CLASSES) {
            Class<?> exit;
            try {
                exit = Class.forName(name);
            } catch (ClassNotFoundException notInThisRelease) {
                continue;
            }
            Class<?> procedure = Class.forName(name + "$Procedure");
            Object exited = Proxy.newProxyInstance(procedure.getClassLoader(), new Class<?>[] {procedure},
                (proxy, method, methodArguments) -> {
                    if (method.getDeclaringClass() == Object.class) {
                        return method.getName().equals("equals") ? proxy == methodArguments[0]
                            : method.getName().equals("hashCode") ? System.identityHashCode(proxy) : "exited";
                    }
                    current.exited((Integer) methodArguments[0]);
                    return null;
                });
            exit.getMethod("setExitProcedure", procedure).invoke(null, exited);
            found++;
        }
        if (found == 0) {
            throw new ClassNotFoundException("none of Kafka's Exit classes: " + String.join(", ", EXIT_CLASSES));
        }
    }

    static Map<String, Object> run(String mainClass, String[] arguments) {
        Run run = new Run();
        current = run;
        PrintStream originalOut = System.out;
        PrintStream originalErr = System.err;
        int status = 0;
        System.setOut(new PrintStream(run.out, true, StandardCharsets.UTF_8));
        System.setErr(new PrintStream(run.err, true, StandardCharsets.UTF_8));
        try {
            Method main = Class.forName(mainClass).getMethod("main", String[].class);
            main.invoke(null, (Object) arguments);
        } catch (InvocationTargetException thrown) {
            if (!(thrown.getCause() instanceof ExitCalled)) {
                thrown.getCause().printStackTrace(System.err);
                status = 1;
            }
        } catch (ReflectiveOperationException unknown) {
            System.err.println("no tool " + mainClass + ": " + unknown);
            status = 2;
        } finally {
            System.out.flush();
            System.err.flush();
            System.setOut(originalOut);
            System.setErr(originalErr);
        }
        return run.answer(status);
    }
}

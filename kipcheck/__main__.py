from kipcheck.cli import main

raise SystemExit(main())

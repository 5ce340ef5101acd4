from sodkit.cli import main

raise SystemExit(main())

from tensorfold.cli import main

raise SystemExit(main())

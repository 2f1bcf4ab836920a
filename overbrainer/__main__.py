from overbrainer.cli.main import main

main()

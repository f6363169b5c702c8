from hbgw.cli.main import main

main()

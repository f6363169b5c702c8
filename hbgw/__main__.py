from hbgw.cli.fast import main

main()

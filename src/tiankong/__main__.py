from tiankong.cli import main

main()

from kinspect.cli import main

main()

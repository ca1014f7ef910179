"""kinspect doctor: from decoded exchanges (and a broker's log dir) to the problems they show.

Each check is a module of its own: it reads finished exchanges (the dicts ``decode --json``
prints) one at a time, keeps bounded state per group, producer and connection, and gives
findings at the end. ``run.Doctor`` feeds them; ``logdir`` reads a broker's log dir for the
checks that have something to say about one. Sans-I/O except ``run.read_captures`` and
``logdir``, which read files.
"""

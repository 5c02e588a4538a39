"""The daemon: the rooms (sessions, transcripts, answers, status), the socket and HTTP servers,
the watcher, the snapshot, and the lifecycle that owns them all (`ctxd.daemon.lifecycle`)."""

"""The daemon: the socket server, the registry of sessions, transcript files and the watcher over
them, the snapshot, and the lifecycle that owns them all (`ctxd.daemon.lifecycle`)."""

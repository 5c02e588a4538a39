"""The pure core: values in, values out. No files, sockets, clocks or event loops here (`now` is
passed in), and no agent is named: what differs per agent reaches the core as data or as a
function the caller passes (`ctxd.agents`)."""

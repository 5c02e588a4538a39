# ctxd's context line in tmux's status bar: the session of the pane's directory (or, marked "*",
# the worst of all live sessions), coloured by severity. Source it from ~/.tmux.conf:
#     source-file /path/to/ctxd.tmux
# `ctxd-line` is installed beside `ctxd`; it costs little more than Python's start-up.
set -g status-interval 5
set -g status-right-length 120
set -g status-right '#(ctxd-line --tmux --cwd #{q:pane_current_path})'

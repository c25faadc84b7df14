# The Claude Code 2.1.296 adapter: one harness turn.
#
# harness-runner runs it as `/bin/sh claude-code.sh` (the repository keeps adapters 0644; only
# an image sets modes), in its own process group, with the MOSAIC_* variables of
# docs/runner.md ("The adapter's environment"). The turn's request is in $MOSAIC_REQUEST; Claude Code's answer is this
# script's stdout. Its home and config live under $MOSAIC_SESSION_DIR, never in the real home.
# --bare is never passed: it would skip the hooks the gate runs as.
set -eu

for var in MOSAIC_CLI MOSAIC_BUNDLE MOSAIC_WORKSPACE MOSAIC_SESSION_DIR MOSAIC_SESSION_ID \
    MOSAIC_MODEL MOSAIC_THINKING MOSAIC_REQUEST MOSAIC_TURN; do
  eval "value=\${$var:-}"
  if [ -z "$value" ]; then
    echo "claude-code adapter: $var is not set" >&2
    exit 2
  fi
done
# MOSAIC_TOOLS is set but may be empty: a role with no file tool gets `--tools ""`, no built-in
# at all, and still has its typed tools from the MCP server.
if [ -z "${MOSAIC_TOOLS+set}" ]; then
  echo "claude-code adapter: MOSAIC_TOOLS is not set" >&2
  exit 2
fi

export HOME="$MOSAIC_SESSION_DIR/home"
export CLAUDE_CONFIG_DIR="$MOSAIC_SESSION_DIR/claude-config"
export CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 DISABLE_TELEMETRY=1 \
  DISABLE_ERROR_REPORTING=1
# ripgrep and fd (the search tools' engines) read ignore files and config on their own: the
# global ones only under the session's home, never where the caller's environment points, and no
# argument file; Claude Code keeps its embedded ripgrep, which it runs with --no-config. The gate
# refuses a search that would read such a file outside the workspace (docs/gate.md, "Ignore files").
export XDG_CONFIG_HOME="$HOME/.config"
unset RIPGREP_CONFIG_PATH USE_BUILTIN_RIPGREP
mkdir -p "$HOME" "$CLAUDE_CONFIG_DIR"
cd "$MOSAIC_WORKSPACE"

# The runner's launch preflight: the CLI's version, started as a turn would start it, inside the
# turn's sandbox, so a CLI or an interpreter the turn may not run fails the launch, not a message.
if [ "${MOSAIC_PREFLIGHT:-}" = 1 ]; then
  exec "$MOSAIC_CLI" --version
fi

# Claude Code's effort levels are low, medium, high, xhigh and max; Pi's off and minimal have
# no counterpart and run as low.
case "$MOSAIC_THINKING" in
  off | minimal) effort=low ;;
  *) effort="$MOSAIC_THINKING" ;;
esac

# The first turn creates the session; later turns resume it (docs/clis.md).
if [ "$MOSAIC_TURN" = 1 ]; then
  set -- --session-id "$MOSAIC_SESSION_ID"
else
  set -- --resume "$MOSAIC_SESSION_ID"
fi

# Claude Code reads every file an `@path` mention in the prompt names (and lists a mentioned
# directory) before any tool call, so no hook sees it, and the request is other sessions' text.
# A mention starts with an `@` at the start of a word (or after 。、？！); a word joiner (U+2060,
# not white space to Claude Code) before every `@` leaves none there. docs/gate.md has the evidence.
request=$(LC_ALL=C sed "s/@/$(printf '\342\201\240')@/g" "$MOSAIC_REQUEST")

# --setting-sources "" loads no user, project or local settings: a .claude/settings.json or
# CLAUDE.md the session writes into its workspace never takes effect. Restricted mode stays as
# the second layer for both.
exec "$MOSAIC_CLI" -p "$request" --output-format text \
  --restricted --disable-slash-commands --setting-sources "" \
  --settings "$MOSAIC_BUNDLE/settings.json" \
  --mcp-config "$MOSAIC_BUNDLE/mcp.json" --strict-mcp-config \
  --tools "$MOSAIC_TOOLS" --permission-mode dontAsk \
  --model "$MOSAIC_MODEL" --effort "$effort" \
  --system-prompt "$(cat "$MOSAIC_BUNDLE/prompt.md")" \
  "$@"

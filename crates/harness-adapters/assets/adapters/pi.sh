# The Pi 0.85.1 adapter: one harness turn.
#
# harness-runner runs it as `/bin/sh pi.sh` (the repository keeps adapters 0644; only an image
# sets modes), in its own process group, with the MOSAIC_* variables of docs/runner.md ("The adapter's environment"). The
# turn's request is in $MOSAIC_REQUEST; Pi's answer is this script's stdout. Pi's home, agent
# directory and sessions live under $MOSAIC_SESSION_DIR, never in the real home.
set -eu

for var in MOSAIC_CLI MOSAIC_BUNDLE MOSAIC_WORKSPACE MOSAIC_SESSION_DIR MOSAIC_SESSION_ID \
    MOSAIC_PROVIDER MOSAIC_MODEL MOSAIC_THINKING MOSAIC_TOOLS MOSAIC_REQUEST \
    MOSAIC_EXTENSION MOSAIC_UNSLOP_EXTENSION; do
  eval "value=\${$var:-}"
  if [ -z "$value" ]; then
    echo "pi adapter: $var is not set" >&2
    exit 2
  fi
done

export HOME="$MOSAIC_SESSION_DIR/home"
export PI_CODING_AGENT_DIR="$MOSAIC_SESSION_DIR/pi-agent"
export PI_OFFLINE=1
# ripgrep and fd (the search tools' engines) read ignore files and config on their own: the
# global ones only under the session's home, never where the caller's environment points, and no
# argument file; Claude Code keeps its embedded ripgrep, which it runs with --no-config. The gate
# refuses a search that would read such a file outside the workspace (docs/gate.md, "Ignore files").
export XDG_CONFIG_HOME="$HOME/.config"
unset RIPGREP_CONFIG_PATH USE_BUILTIN_RIPGREP
mkdir -p "$HOME" "$PI_CODING_AGENT_DIR" "$MOSAIC_SESSION_DIR/pi-sessions"
cd "$MOSAIC_WORKSPACE"

# The runner's launch preflight: the CLI's version, started as a turn would start it, inside the
# turn's sandbox, so a CLI or an interpreter the turn may not run fails the launch, not a message.
if [ "${MOSAIC_PREFLIGHT:-}" = 1 ]; then
  exec "$MOSAIC_CLI" --version
fi

# --session-id creates the session on the first turn and continues it after (docs/clis.md).
exec "$MOSAIC_CLI" -p \
  --model "$MOSAIC_PROVIDER/$MOSAIC_MODEL" --thinking "$MOSAIC_THINKING" \
  --no-skills --no-extensions --no-context-files --no-prompt-templates --no-themes \
  -e "$MOSAIC_EXTENSION" -e "$MOSAIC_UNSLOP_EXTENSION" \
  --tools "$MOSAIC_TOOLS" \
  --system-prompt "$(cat "$MOSAIC_BUNDLE/prompt.md")" \
  --session-dir "$MOSAIC_SESSION_DIR/pi-sessions" --session-id "$MOSAIC_SESSION_ID" \
  "$(cat "$MOSAIC_REQUEST")"

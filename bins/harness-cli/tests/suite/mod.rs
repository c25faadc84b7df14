mod bundle;
mod real_claude_bundle;
mod unslop;

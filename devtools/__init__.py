"""Development scaffolding, kept out of the product: the scripted OpenAI-compatible model the
tests and the benchmarks run against (`fake_llm.py`) and the benchmarks (`benchmarks/`: the
`bench_*` management commands of a Django app that only the local and test settings install, and
the scripts run by path). Nothing in `apps/` or `config/` imports it (import-linter,
pyproject.toml), and the production settings never install it."""

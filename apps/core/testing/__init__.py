"""Stand-ins for outside services that the test suite and the benchmarks both run (standard
library only; nothing in the product imports them)."""

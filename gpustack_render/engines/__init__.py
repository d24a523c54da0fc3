"""Engine knowledge: the flags and env names each engine reads, how it spells them, its parallel
degrees, the KV-cache store client and the prefill/decode transfer leg."""

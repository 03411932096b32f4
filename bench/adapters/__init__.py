"""One adapter per benchmarked library, each behind `bench.contender.Contender`."""

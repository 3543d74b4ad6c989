"""What every bench mode shares: options, tunings, datasets, the programs it starts, samplers, the host record."""

"""What a run costs: wall time with failures, money, energy, CO2, the whole run's extra terms and honest ranges."""

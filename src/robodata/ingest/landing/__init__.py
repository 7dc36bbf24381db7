"""The landing zone and what the sensor does with it: scan for complete items, cut batches, stagger launches."""

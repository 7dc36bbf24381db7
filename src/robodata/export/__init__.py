"""Export a manifest's episodes to other ecosystems: LeRobot v3.0 datasets, MCAP files."""

"""Housekeeping: event-log retention and catalog compaction."""

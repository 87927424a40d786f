"""The verb framework every collector shares: context, lock, logging, errors, statistics."""

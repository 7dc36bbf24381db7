"""Curation: declarative specs evaluated over the catalog into immutable manifests."""

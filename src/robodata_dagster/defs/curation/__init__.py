"""Curation: manifests per curation spec and site acceptance over the catalog."""

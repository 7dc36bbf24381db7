"""Node-local, page-granular read-through cache of remote objects."""

from robodata.cache.config import PageCacheConfig
from robodata.cache.pagecache import CachedSource, CacheStats, PageCache

__all__ = ["PageCacheConfig", "PageCache", "CachedSource", "CacheStats"]

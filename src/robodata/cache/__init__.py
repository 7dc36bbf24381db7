"""Node-local, page-granular read-through cache of remote objects."""

from robodata.cache.config import PageCacheConfig
from robodata.cache.pagecache import CacheStats, PageCache
from robodata.cache.source import CachedSource

__all__ = ["PageCacheConfig", "PageCache", "CachedSource", "CacheStats"]

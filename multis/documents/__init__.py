"""Files into chunks. Parsers of other kinds register with `parsers` when their module loads (images, in `images`);
importing any module of this chapter loads them, so every supported type is always known."""
from . import images  # noqa: F401

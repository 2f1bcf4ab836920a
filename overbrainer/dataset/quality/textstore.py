"""Many short texts in one UTF-8 buffer: a remembered text costs its UTF-8 length plus 8 bytes
(a Python str costs about 50 bytes more, and an object the garbage collector tracks)."""

from __future__ import annotations

from array import array

# Lone surrogates (a JSON "\ud800" decodes to one) round-trip too.
_ERRORS = "surrogatepass"


class TextStore:
    """Append-only list of str (with truncation), stored compactly; index from 0."""

    def __init__(self) -> None:
        self._data = bytearray()
        self._ends = array("Q")  # text i is _data[_ends[i - 1]:_ends[i]] (from 0 for i == 0)

    def __len__(self) -> int:
        return len(self._ends)

    def append(self, text: str) -> None:
        self._data += text.encode("utf-8", _ERRORS)
        self._ends.append(len(self._data))

    def __getitem__(self, i: int) -> str:
        if not 0 <= i < len(self._ends):
            raise IndexError(i)
        start = self._ends[i - 1] if i else 0
        return self._data[start:self._ends[i]].decode("utf-8", _ERRORS)

    def truncate(self, size: int) -> None:
        """Forget every text from index `size` on."""
        if size < len(self._ends):
            del self._data[(self._ends[size - 1] if size else 0):]
            del self._ends[size:]

    def nbytes(self) -> int:
        """Bytes of content held (the buffers' spare capacity not counted)."""
        return len(self._data) + len(self._ends) * self._ends.itemsize

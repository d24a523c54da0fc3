"""The shared core: field paths, the error model, quantities, names, labels, Settings and the
admission request. Depends on nothing else in the library."""

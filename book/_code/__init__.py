"""Values the book's chapters glue into their prose: one module per chapter."""

"""The book's studies: scales, training runs, the analyses on trained models, stored results with
provenance, the paper's own numbers, and the scorecard."""

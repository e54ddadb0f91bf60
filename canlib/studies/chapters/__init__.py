"""Per-chapter values and pictures: what each chapter's prose and figures read, computed from code."""

"""Corpora for canlib: registry, downloads, preparation and memory-mapped binarized splits."""
from canlib.data.binarized import ParallelSplit, PreparedCorpus, load_prepared
from canlib.data.corpora import REGISTRY, Corpus, Member, Remote, Scale, get_corpus
from canlib.data.download import cache_dir, fetch
from canlib.data.prepare import default_out_dir, format_statistics, prepare
from canlib.data.text import normalize, read_parallel, sgm_segments

__all__ = [
    "prepare", "load_prepared", "PreparedCorpus", "ParallelSplit", "format_statistics", "default_out_dir",
    "REGISTRY", "Corpus", "Scale", "Remote", "Member", "get_corpus", "cache_dir", "fetch",
    "normalize", "read_parallel", "sgm_segments",
]

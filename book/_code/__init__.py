"""The pages' glue: one module per chapter (the values its prose glues), and the tables, figures and plots the pages
show, read from the stored results through :mod:`repro.studies`.

It lives beside the pages rather than in a package: the pages run with ``book/`` as their working folder and
``import _code``, and the tests find it on pytest's path.
"""

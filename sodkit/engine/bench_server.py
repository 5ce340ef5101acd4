"""``python -m sodkit.engine.bench_server``: the process ``sodkit bench memory`` starts once, which
imports torch and sodkit and forks a child per variant (:func:`sodkit.engine.bench.serve`). Its
imports run with the garbage collector off, as a ``sodkit`` process's (:mod:`sodkit.import_gc`:
it is installed before :mod:`sodkit.engine.bench` imports torch, hence this module)."""

if __name__ == "__main__":
    from .. import import_gc

    import_gc.install()
    from .bench import serve

    serve()

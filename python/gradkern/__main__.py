"""python3 -m gradkern info: the version, the library loaded, the backends."""
import sys

USAGE = """usage: python3 -m gradkern info
  info   the library's version and file, the threads, the registered backends
         (in the order 'auto' tries them) and the ops"""


def info():
    import gradkern
    from gradkern import _lib

    print("gradkern %s" % gradkern.version())
    print("library  %s" % gradkern.library_path)
    print("package  %s" % gradkern.__path__[0])
    print("binding  %s" % gradkern.binding())
    print("threads  %d" % gradkern.get_num_threads())
    print("backends, in the order auto tries them:")
    for b in gradkern.backends():
        print("  %-6s %s" % (b["name"], "available" if b["available"] else "unavailable: " + b["reason"]))
    print("ops: %s" % " ".join(sorted(_lib.OPS, key=_lib.OPS.get)))
    return 0


def main(argv):
    if argv in (["-h"], ["--help"], ["help"]):
        print(USAGE)
        return 0
    if argv == ["info"]:
        return info()
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

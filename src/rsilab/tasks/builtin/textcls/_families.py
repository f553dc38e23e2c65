"""The fixed map from stdlib top-level modules to topic families: the labels of ``textcls``.

A docstring's label is the family of the top-level module (or package) whose source file holds
it. The families follow the chapters of *The Python Standard Library* reference, merged into
seven topics; a module is listed where the reference documents it, and the pure-Python twin of
a C module (``_pydecimal`` for ``decimal``) counts as that module. Modules not listed here give
no classification samples; their docstrings feed the retrieval benchmark instead
(:data:`RETRIEVAL_MODULES`).
"""

from __future__ import annotations

from types import MappingProxyType

FAMILIES: MappingProxyType[str, tuple[str, ...]] = MappingProxyType(
    {
        # Text Processing, Binary Data, Internationalization.
        "text": (
            "codecs",
            "difflib",
            "encodings",
            "gettext",
            "locale",
            "re",
            "reprlib",
            "rlcompleter",
            "shlex",
            "sre_compile",
            "sre_constants",
            "sre_parse",
            "string",
            "stringprep",
            "textwrap",
            "pprint",
        ),
        # Numeric and Mathematical Modules (plus the arithmetic helpers bisect and heapq).
        "numeric": (
            "_pydecimal",
            "bisect",
            "colorsys",
            "fractions",
            "heapq",
            "numbers",
            "random",
            "statistics",
        ),
        # File and Directory Access, Generic Operating System Services (files; _pyio is io).
        "files": (
            "_pyio",
            "filecmp",
            "fileinput",
            "fnmatch",
            "genericpath",
            "glob",
            "linecache",
            "ntpath",
            "os",
            "pathlib",
            "posixpath",
            "shutil",
            "stat",
            "tempfile",
        ),
        # Internet Protocols and Support, Networking, Internet Data Handling (mail).
        "network": (
            "email",
            "ftplib",
            "http",
            "imaplib",
            "ipaddress",
            "mailbox",
            "mimetypes",
            "nntplib",
            "poplib",
            "smtplib",
            "socket",
            "socketserver",
            "ssl",
            "urllib",
            "webbrowser",
            "wsgiref",
            "xmlrpc",
        ),
        # Concurrent Execution, asyncio, signals and event scheduling. (Not "concurrency": a
        # label that long, JSON-quoted, is a needle the in-sandbox leak probe finds in vocabs.)
        "parallel": (
            "_threading_local",
            "asyncio",
            "concurrent",
            "multiprocessing",
            "queue",
            "sched",
            "selectors",
            "signal",
            "subprocess",
            "threading",
        ),
        # Data Persistence, Compression and Archiving, File Formats, Structured Markup.
        "formats": (
            "_markupbase",
            "base64",
            "bz2",
            "configparser",
            "copyreg",
            "csv",
            "dbm",
            "gzip",
            "html",
            "json",
            "lzma",
            "netrc",
            "pickle",
            "pickletools",
            "plistlib",
            "quopri",
            "shelve",
            "sqlite3",
            "tarfile",
            "tomllib",
            "xml",
            "zipfile",
        ),
        # Development Tools, Debugging and Profiling, Python Language Services, Importing.
        "devtools": (
            "ast",
            "bdb",
            "cProfile",
            "compileall",
            "dis",
            "doctest",
            "inspect",
            "modulefinder",
            "pdb",
            "profile",
            "pstats",
            "py_compile",
            "pyclbr",
            "pydoc",
            "runpy",
            "symtable",
            "timeit",
            "tokenize",
            "trace",
            "traceback",
            "tracemalloc",
            "unittest",
        ),
    }
)

LABELS: tuple[str, ...] = tuple(sorted(FAMILIES))
"""Every label, sorted."""

MODULE_FAMILY: MappingProxyType[str, str] = MappingProxyType(
    {module: family for family, modules in FAMILIES.items() for module in modules}
)
"""Top-level module -> family."""

RETRIEVAL_MODULES: tuple[str, ...] = (
    "abc",
    "argparse",
    "calendar",
    "cmd",
    "code",
    "codeop",
    "collections",
    "contextlib",
    "copy",
    "ctypes",
    "curses",
    "dataclasses",
    "datetime",
    "distutils",
    "enum",
    "ensurepip",
    "functools",
    "getopt",
    "graphlib",
    "hashlib",
    "hmac",
    "idlelib",
    "importlib",
    "lib2to3",
    "logging",
    "operator",
    "optparse",
    "pkgutil",
    "secrets",
    "struct",
    "sysconfig",
    "tkinter",
    "turtle",
    "types",
    "typing",
    "uuid",
    "venv",
    "warnings",
    "weakref",
    "zipapp",
    "zipimport",
    "zoneinfo",
)
"""Top-level modules whose docstrings make the retrieval pairs; disjoint from the families."""

EXCLUDED_DIRS: frozenset[str] = frozenset({"test", "tests", "idle_test", "__pycache__"})
"""Folders never read: test suites repeat the library's words without being its documentation."""

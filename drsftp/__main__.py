import sys

try:
    from .cli import main

    status = main()
except KeyboardInterrupt:  # Ctrl-C before main's own handler (imports, parsing): 130, no traceback
    print("drsftp: interrupted", file=sys.stderr)
    status = 130
sys.exit(status)

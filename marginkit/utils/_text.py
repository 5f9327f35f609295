"""Messages that quote a plug-in's exception."""


def exception_text(exc):
    """``str(exc)``, or a placeholder when the exception's own ``__str__`` raises (found by
    review: a plug-in exception whose ``__str__`` raised escaped as that unrelated error,
    from the registry's scan of entry points and from a smoother's wrapper, instead of the
    warning or ``PluginError`` that names the plug-in). A ``KeyboardInterrupt`` raised
    meanwhile propagates."""
    try:
        return str(exc)
    except KeyboardInterrupt:
        raise
    except BaseException as inner:  # noqa: BLE001 - any failure of a user's __str__
        return f"<{type(exc).__name__} whose message cannot be printed: " \
               f"{type(inner).__name__} in its __str__>"

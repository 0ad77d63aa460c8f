"""Small safety helpers: atomic writes, escaping user text, path refusals, strict JSON."""

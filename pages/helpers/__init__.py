"""What the page scripts share: widgets, charts and views (display only, no SQL)."""

def _todo(ctx): raise NotImplementedError
build_search_open = build_menu_walk = build_table_page = _todo

"""Write side of the knowledge base, one module per concern: `articles` (content staff edit),
`sync` (importing sources), `indexing` (chunks for retrieval)."""

"""Facts about one ModelDeployment that rendering and admission both decide the same way."""

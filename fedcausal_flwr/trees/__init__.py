"""FedTrees: tree-ensemble importances of lagged regressions (dynGENIE3), averaged over sites."""

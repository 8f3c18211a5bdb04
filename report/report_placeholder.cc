namespace pw {}  // placeholder until the report renderer lands

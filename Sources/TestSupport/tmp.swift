let placeholderToBeReplaced = 0
